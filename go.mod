module github.com/micrograph/micrograph

go 1.26
