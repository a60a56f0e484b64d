"""Contributor tools run from a checkout (``make docs``, ``make constructs``): they regenerate files of
this repository and are not part of the installed package or the user's ``lium-tf``."""
