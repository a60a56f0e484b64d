"""The provider's domain rules, each declared once: which offers a pod may rent (:mod:`.offer_filter`),
where a create rents (:mod:`.placement`), when Lium removes a pod by itself (:mod:`.removal`), which stack
an object belongs to (:mod:`.stack`) and the local journal of rent attempts (:mod:`.journal`).

Import names from those modules: this package re-exports nothing.
"""
