package planner

// Every test of the package checks that each GPU's stored class key is its
// state's (stateKey reads the stored one).
func init() { verifyClassKeys = true }
