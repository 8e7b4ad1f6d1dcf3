"""One module per log format, named after the format it reads; each defines ``PARSERS`` (name →
parser function). :mod:`ranklog.parse.registry` finds them here, so adding a module adds a format."""
