"""The reference project's own code: what a user's src/ would hold."""
