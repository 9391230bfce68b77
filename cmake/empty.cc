// Placeholder translation unit for a target that has no sources yet.
