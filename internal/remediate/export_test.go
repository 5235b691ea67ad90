package remediate

// OurEntry exposes ourEntry to the package's external tests.
var OurEntry = ourEntry
