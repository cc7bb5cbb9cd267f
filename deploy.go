// Package fireonce is the root package that Google's Go buildpack compiles
// when the functions are deployed with gcloud functions deploy --source=.
//
// The buildpack builds only the package at the root of the source: it must
// exist, be the only package there, import functions-framework-go's functions
// package (so the buildpack's generated main starts the framework) and,
// through ./functions, register every function. Code lives in ./functions and
// ./shared; keep this file the root's only Go file.
package fireonce

import (
	_ "github.com/GoogleCloudPlatform/functions-framework-go/functions"

	_ "github.com/fireonce/fireonce/functions"
)
