"""The model zoo: real torchvision, timm and transformers models at reduced
sizes, compiled with kiln and compared with eager (tests/python/test_zoo.py,
bench/zoo_gpu.py)."""
