terraform import lium_cluster.train 6f0e2c1a-3b7d-4c55-9e2a-8d41f0b9c3e7
