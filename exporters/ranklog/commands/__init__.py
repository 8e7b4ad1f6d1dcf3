"""One module per ``ranklog`` subcommand: ``build_parser(prog)`` and ``main(args) -> int``.

These are thin adapters from flags to the packages that do the work; they import only the
stdlib at module level (see :mod:`ranklog.cli`).
"""
