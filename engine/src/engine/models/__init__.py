"""Pretrained models by config: the model groups timm and torchvision, weights from files and
hubs as hostile input, and the data settings a model was pretrained with (transforms=model)."""
