"""A Flower app training the CEPAM paper's MNIST CNN with cepam on every update."""
