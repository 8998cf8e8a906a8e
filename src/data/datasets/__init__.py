"""One module per dataset kind: imagefolder, csv, tensor file, tar shards."""
