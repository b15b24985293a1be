import TestPKI
