"""Flower's PyTorch quickstart app on MNIST, with cepam."""
