;;;; run-tests.lisp - sbcl --non-interactive --load bindings/lisp/tests/run-tests.lisp
;;;;
;;;; Loads CFFI from the Debian source registry (/usr/share/common-lisp/) and the
;;;; knn-gpgpu system from this checkout, runs the tests, and exits 0 when all
;;;; pass, 1 otherwise. The library comes from $KNN_GPGPU_LIBRARY (full path) or
;;;; the dynamic loader's search path.

(require :asdf)

(let ((here (uiop:pathname-directory-pathname (or *load-truename* *compile-file-truename*))))
  (asdf:initialize-source-registry
   `(:source-registry
     (:directory ,(uiop:pathname-parent-directory-pathname here))
     (:tree "/usr/share/common-lisp/source/")
     (:directory "/usr/share/common-lisp/systems/")
     :inherit-configuration)))

(handler-bind ((warning #'muffle-warning))   ; CFFI's own compile notes
  (asdf:load-system "cffi"))
(asdf:load-system "knn-gpgpu/tests")

(uiop:quit (if (uiop:symbol-call :knn-gpgpu-tests :run-all) 0 1))
