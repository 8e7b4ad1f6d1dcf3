"""Loki compatibility of the archive: the LogQL subset (:mod:`.logql`), its evaluation on the query
engine (:mod:`.evaluate`), request parameters (:mod:`.params`) and the read API's routes (:mod:`.routes`)."""
