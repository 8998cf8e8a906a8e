"""pkg://engine.conf: the engine's own config groups, on Hydra's search path by the
`hydra.searchpath` of a project's conf/config.yaml. A file of the same name in the project's
conf/ comes first on that path, so it replaces the engine's."""
