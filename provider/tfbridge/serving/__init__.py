"""How a provider process serves Terraform: go-plugin's handshake and serving loop (:mod:`.handshake`,
:mod:`.lifecycle`), its side services (:mod:`.plugin_services`), AutoMTLS (:mod:`.tls_relay`,
:mod:`.tls_certificate`), warm starts (:mod:`.launch`, :mod:`.zygote`, :mod:`.constants`) and the
filesystem-mirror launcher (:mod:`.install`).

None of it is a provider author's API (that is :mod:`tfbridge`); :func:`tfbridge.plugin.main` starts it.
This package re-exports nothing, so the launcher's path stays free of the framework's imports.
"""
