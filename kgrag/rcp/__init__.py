"""RCP/1 on our side of the wire: parameter models (:mod:`.params`), the result
shapes (:mod:`.wire`), agentic sessions and cursors (:mod:`.sessions`) and the
feedback store (:mod:`.feedback`)."""
