// Package buildtest checks that the deployed source builds and serves the
// way the Cloud Functions Go buildpack builds it: only the files a deployment
// uploads (function.SourceFiles), laid out as the buildpack lays them out,
// with the main package the buildpack generates.
//
// It holds tests only. Nothing may import it.
package buildtest
