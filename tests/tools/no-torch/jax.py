# jax.py: stands in for a missing JAX in tools/cold-process-no-peers (PYTHONPATH
# puts this folder first, so `import jax` fails as it does without JAX).
raise ImportError("JAX hidden by tests/tools/no-torch")
