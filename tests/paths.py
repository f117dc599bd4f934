"""Where the checkout's files are, for a test at any depth under tests/."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent   # the checkout
FIXTURES = ROOT / "tests" / "fixtures"
