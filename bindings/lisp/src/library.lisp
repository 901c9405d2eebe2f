;;;; library.lisp - finding and loading libknn_gpgpu.
;;;;
;;;; Search order (the first that loads wins):
;;;;   1. KNN_GPGPU_LIBRARY, the library's full path (when set, nothing else is
;;;;      tried: a wrong path is an error, not a silent fallback);
;;;;   2. where `cmake --install` put it, read from library-location.sexp next
;;;;      to the installed system (share/common-lisp/source/knn-gpgpu/; absent
;;;;      in a source checkout): the library directory relative to the system
;;;;      (right after `cmake --install --prefix` anywhere), then as configured;
;;;;   3. the dynamic loader's search (LD_LIBRARY_PATH, the ldconfig cache, PATH
;;;;      on Windows).
;;;; The library is loaded when the system loads; when that fails a warning
;;;; says why, and the first call into the library tries again and signals
;;;; KNN-LIBRARY-NOT-FOUND (a KNN-ERROR) naming what to install or set.
;;;; (load-library "/path/to/libknn_gpgpu.so.1") loads a given file.

(in-package #:knn-gpgpu)

(defconstant +abi-major+ 1 "Major version of the C ABI this binding is written for.")
(defparameter +library-env-var+ "KNN_GPGPU_LIBRARY")

(cffi:define-foreign-library libknn-gpgpu
  (:darwin (:or "libknn_gpgpu.1.dylib" "libknn_gpgpu.dylib"))
  (:windows "knn_gpgpu.dll")
  (t (:or "libknn_gpgpu.so.1" "libknn_gpgpu.so")))

(defparameter *library-file-name*
  #+darwin "libknn_gpgpu.1.dylib" #+windows "knn_gpgpu.dll"
  #-(or darwin windows) "libknn_gpgpu.so.1"
  "The run-time file name of the library, as `cmake --install` writes it.")

(defvar *library-path* nil "Path or name the library was loaded from, NIL before loading.")

(defun library-path () *library-path*)

(defun installed-library-files ()
  "Step 2 of the search: the library files library-location.sexp points to."
  (let* ((system-dir (asdf:system-source-directory "knn-gpgpu"))
         (location (and system-dir (probe-file (merge-pathnames "library-location.sexp" system-dir)))))
    (when location
      (destructuring-bind (&key relative-library-directory configured-library-directory)
          (with-open-file (in location)
            (with-standard-io-syntax
              (let ((*read-eval* nil)) (read in))))
        (remove-duplicates
         (list (concatenate 'string (uiop:native-namestring system-dir)
                            relative-library-directory *library-file-name*)
               (concatenate 'string configured-library-directory *library-file-name*))
         :test #'string=)))))

(defun try-load (designator)
  "Load DESIGNATOR (a path or the foreign library); NIL on success, else why not."
  (handler-case (progn (cffi:load-foreign-library designator) nil)
    (error (e) (princ-to-string e))))

(defun open-library (path)
  "Load PATH, or when NIL $KNN_GPGPU_LIBRARY, else the installed library, else the
loader's search; check the major version. Returns the path or name used, or NIL
and a text that says what was tried and what to install or set."
  (let* ((env (let ((value (uiop:getenv +library-env-var+)))
                (and value (plusp (length value)) value)))
         (explicit (or path env))
         (tried '())
         (loaded nil))
    (flet ((attempt (designator name)
             (let ((why (try-load designator)))
               (if why
                   (progn (push (format nil "~A (~A)" name why) tried) nil)
                   name))))
      (setf loaded
            (if explicit
                (attempt explicit explicit)
                (or (loop for file in (installed-library-files)
                          thereis (and (probe-file file) (attempt file file)))
                    (attempt 'libknn-gpgpu "libknn_gpgpu (loader search)")))))
    (cond ((null loaded)
           (values nil (format nil "cannot load libknn_gpgpu: ~:[install the library (`cmake ~
                                    --install build`, which also installs this system under ~
                                    share/common-lisp), put its directory on LD_LIBRARY_PATH, ~
                                    or set ~A to its full path~;set ~A to the library's full ~
                                    path~]. Tried: ~{~A~^; ~}"
                               explicit +library-env-var+ (reverse tried))))
          (t
           (let ((version (cffi:foreign-funcall "knn_version" :int)))
             (if (= (floor version 10000) +abi-major+)
                 loaded
                 (values nil (format nil "~A is knn_gpgpu version ~D; this binding needs major ~
                                          version ~D" loaded version +abi-major+))))))))

(defun load-library (&optional path)
  "Load libknn_gpgpu from PATH, else from $KNN_GPGPU_LIBRARY, else from where
`cmake --install` put it, else through the dynamic loader's search. Checks the
major version. Returns the path used; signals KNN-LIBRARY-NOT-FOUND when nothing
loads or the library's major version differs."
  (multiple-value-bind (loaded why) (open-library path)
    (setf *library-path* loaded)
    (or loaded (error 'knn-library-not-found :message why))))

(defun ensure-library ()
  "The library's path, loading it first when needed (KNN-LIBRARY-NOT-FOUND if it cannot be)."
  (or *library-path* (load-library)))

;;; When the system loads (KNN-LIBRARY-NOT-FOUND is defined later, in conditions.lisp).
(multiple-value-bind (loaded why) (open-library nil)
  (setf *library-path* loaded)
  (unless loaded
    (warn "knn-gpgpu: libknn_gpgpu not loaded yet: ~A" why)))
