"""The tools that build shipped files: each writes a file the `oracle` package ships, reproducibly.

    python -m tools.train_fusion    # oracle/retrieve/fusion_model.json, the learned fusion's model
"""
