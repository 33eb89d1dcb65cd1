"""Layer 3, experiments bound to an exact engine build: binding, attempts ledger, engine
process, registry, launch, resume, status."""
