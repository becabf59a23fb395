//! Root package: holds the integration tests and examples of the rumus workspace.
