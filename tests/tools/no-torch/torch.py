# torch.py: stands in for a missing PyTorch in tools/peers-no-torch (PYTHONPATH
# puts this folder first, so `import torch` fails as it does without PyTorch).
raise ImportError("PyTorch hidden by tests/tools/no-torch")
