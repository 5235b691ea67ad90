package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

func init() {
	p := os.Getenv("ZZ_HEAPPROFILE")
	if p == "" {
		return
	}
	go func() {
		for {
			time.Sleep(3 * time.Second)
			runtime.GC()
			f, err := os.Create(p + ".tmp")
			if err != nil {
				return
			}
			pprof.WriteHeapProfile(f)
			f.Close()
			os.Rename(p+".tmp", p)
		}
	}()
}
