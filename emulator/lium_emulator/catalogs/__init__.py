"""What the emulated Lium offers: its GPU nodes (:mod:`.nodes`, loaded from ``data/nodes.json`` or
``--nodes``), its public templates (:mod:`.templates`) and the images it knows how to start
(:mod:`.images`). This package re-exports nothing.
"""
