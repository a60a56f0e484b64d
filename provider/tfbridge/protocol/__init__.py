"""tfplugin6 on the wire: cty values and types (:mod:`.cty`), conversions between protocol messages and
tfbridge's types (:mod:`.conversions`), and the Provider service that maps each RPC onto a provider
(:mod:`.server`).

Provider authors never import it; :func:`tfbridge.plugin.main` serves it. This package re-exports nothing.
"""
