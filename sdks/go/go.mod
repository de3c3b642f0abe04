module github.com/AjmalX0/Orbit/sdks/go

go 1.21
