"""Losses for the `loss` config group, one module each.

Put yours here: a class taking the train dataset first, then its YAML keys, whose
forward(logits, labels) returns the mean loss.
"""
