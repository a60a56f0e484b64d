"""Lium REST API client: typed calls, safe errors, reconciled rent and offer search.

Modules: :mod:`.client` (``LiumClient``), :mod:`.transport` (retries), :mod:`.errors`, :mod:`.models`,
:mod:`.rent` (``rent_reconciled``), :mod:`.offers` (``find_offers``). Import names from those modules:
this package re-exports nothing, so importing one of them loads only what it needs (:mod:`.offers`
imports gpuhunt, about 50 ms, and Terraform starts the provider several times per command).
"""
