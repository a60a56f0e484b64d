"""What the emulator stores: the records (:mod:`.entities`), every account's working state
(:mod:`.state`), its durable store for ``--state-dir`` (:mod:`.store`), the ledger of rent idempotency
keys (:mod:`.idempotency`) and Lium's timestamps (:mod:`.timeutil`). This package re-exports nothing.
"""
