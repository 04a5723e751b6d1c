"""Incremental updates: add and delete documents without a full rebuild
(:mod:`.update`), the record-level merge (:mod:`.merge`), and the local repair of
the community hierarchy (:mod:`.communities`) and the RAPTOR tree (:mod:`.tree`)."""
