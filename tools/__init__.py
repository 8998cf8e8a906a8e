"""The template repo's own tooling (never copied into a project): `make new-project`."""
