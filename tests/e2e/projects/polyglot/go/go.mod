module orbit.test/polyglot-go

go 1.21

require github.com/AjmalX0/Orbit/sdks/go v0.1.0

// Builds against the SDK in this repository.
replace github.com/AjmalX0/Orbit/sdks/go => ../../../../../sdks/go
