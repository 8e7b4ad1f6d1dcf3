"""Loki compatibility of the archive: the LogQL subset
(:mod:`ranklog.query.logql`, shared with ``ranklog query``), its evaluation on the query
engine (:mod:`.evaluate`), request parameters (:mod:`.params`) and the read API's routes (:mod:`.routes`)."""
