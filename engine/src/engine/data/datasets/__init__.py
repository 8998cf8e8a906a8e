"""One module per dataset kind (the options of the `dataset` group): imagefolder, csv, tensor,
iterable (tar_shards), sequences, cache, and torchvision's built-in sets (builtin); base.py
holds the contract every kind follows."""
