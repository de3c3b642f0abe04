import sys
sys.path.insert(0, "orbit_core/tests")
from engine_kit import *
from orbit_core.engine import Engine
from orbit_lang import compile_paths
