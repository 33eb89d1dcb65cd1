"""Layer 2, the target environment: locating and probing it, install records and
verification, the install transaction (journal, rollback, repair), history, diagnosis."""
