# Loads a safetensors file with the PyPI `safetensors` package (safetensors.numpy.load_file) and
# prints every tensor's dtype, shape and raw bytes (hex) as JSON, for tests/io/test_checkpoint.cpp.
#   python dump_safetensors.py <file.safetensors>
import json
import sys

from safetensors.numpy import load_file

tensors = load_file(sys.argv[1])
print(json.dumps({k: {"dtype": str(v.dtype), "shape": list(v.shape), "hex": v.tobytes().hex()}
                  for k, v in tensors.items()}))
