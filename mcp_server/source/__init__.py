"""Layer 1, the engine's source: which engine (profile), git (resolve, exact-commit fetch,
subtree id), the reproducible wheel build, local source repositories for the demo and tests."""
