;;;; knn-gpgpu.asd - Common Lisp binding of libknn_gpgpu (CFFI).

(defsystem "knn-gpgpu"
  :description "Exact kNN, radius search, point in polygon, point-to-mesh distance and neighbourhood statistics on NVIDIA GPUs and OpenMP: CFFI binding of libknn_gpgpu"
  :version "1.0.0"
  :license "Apache-2.0"
  :depends-on ("cffi")
  :pathname "src/"
  :serial t
  :components ((:file "package")
               (:file "library")
               (:file "ffi")
               (:file "conditions")
               (:file "arrays")
               (:file "classic")
               (:file "options")
               (:file "handle")
               (:file "index")
               (:file "quadtree")
               (:file "mesh")
               (:file "stats")
               (:file "cancel")
               (:file "progress"))
  :in-order-to ((test-op (test-op "knn-gpgpu/tests"))))

(defsystem "knn-gpgpu/tests"
  :description "Tests of the knn-gpgpu binding (run by tests/run-tests.lisp)"
  :depends-on ("knn-gpgpu")
  :pathname "tests/"
  :serial t
  :components ((:file "harness")
               (:file "oracle")
               (:file "tests")
               (:file "mesh-tests")
               (:file "stats-tests"))
  :perform (test-op (o c)
             (unless (uiop:symbol-call :knn-gpgpu-tests :run-all)
               (error "knn-gpgpu tests failed"))))
