"""``ranklog demo``: the whole pipeline on one machine with a simulated failing 16-rank job.

:mod:`.driver` starts the archive and the agents and tells the story; :mod:`.node` is one simulated
node (its own host name); :mod:`.rank` is one rank training a small numpy model.
"""
