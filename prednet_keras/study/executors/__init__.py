"""Where a study's runs train: on this machine (local_executor) or on a Ray cluster (ray_executor), each run
prepared and finished one way (one_run), from its seed's starting point (starting_points)."""
