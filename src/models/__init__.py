"""Small models; torchvision models are used as plain `_target_`s."""
