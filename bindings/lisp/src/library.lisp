;;;; library.lisp - finding and loading libknn_gpgpu.
;;;;
;;;; KNN_GPGPU_LIBRARY (full path) wins; otherwise the platform's names are
;;;; handed to the dynamic loader (LD_LIBRARY_PATH, the ldconfig cache, PATH on
;;;; Windows). The library is loaded when the system loads; when that fails a
;;;; warning says why and (load-library "/path/to/libknn_gpgpu.so.1") can be
;;;; called later.

(in-package #:knn-gpgpu)

(defconstant +abi-major+ 1 "Major version of the C ABI this binding is written for.")
(defparameter +library-env-var+ "KNN_GPGPU_LIBRARY")

(cffi:define-foreign-library libknn-gpgpu
  (:darwin (:or "libknn_gpgpu.1.dylib" "libknn_gpgpu.dylib"))
  (:windows "knn_gpgpu.dll")
  (t (:or "libknn_gpgpu.so.1" "libknn_gpgpu.so")))

(defvar *library-path* nil "Path or name the library was loaded from, NIL before loading.")

(defun library-path () *library-path*)

(defun load-library (&optional path)
  "Load libknn_gpgpu from PATH, else from $KNN_GPGPU_LIBRARY, else through the
dynamic loader's search. Checks the major version. Returns the path used."
  (let ((path (or path
                  (let ((env (uiop:getenv +library-env-var+)))
                    (and env (plusp (length env)) env)))))
    (if path
        (cffi:load-foreign-library path)
        (cffi:load-foreign-library 'libknn-gpgpu))
    (setf *library-path* (or path "libknn_gpgpu (loader search)"))
    (let ((version (cffi:foreign-funcall "knn_version" :int)))
      (unless (= (floor version 10000) +abi-major+)
        (error "~A is knn_gpgpu version ~D; this binding needs major version ~D"
               *library-path* version +abi-major+)))
    *library-path*))

(handler-case (load-library)
  (error (e)
    (warn "knn-gpgpu: libknn_gpgpu not loaded (~A). Set ~A or call (knn:load-library path)."
          e +library-env-var+)))
