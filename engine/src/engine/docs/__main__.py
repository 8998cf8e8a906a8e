"""`python -m engine.docs`: print where the installed engine's manual is."""

from engine.docs import where

print(where())
