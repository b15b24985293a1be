import AppleTrust
