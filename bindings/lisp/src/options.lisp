;;;; options.lisp - knn_options from Lisp.
;;;;
;;;; OPTIONS is a Lisp structure; a field left NIL keeps the library default.
;;;; WITH-FOREIGN-OPTIONS fills a foreign knn_options with knn_options_init and
;;;; the given fields. knn_options_init writes the *loaded* library's
;;;; sizeof(knn_options), which a newer library may have grown, so it writes
;;;; into a generous scratch block and struct_size is clamped to the fields this
;;;; binding knows.

(in-package #:knn-gpgpu)

(defstruct (options (:constructor make-options
                        (&key backend device structure leaf-size threads device-memory-limit)))
  "Options of the index and quadtree API. BACKEND :auto/:cuda/:openmp;
STRUCTURE :auto/:kdtree/:grid/:brute-force; DEVICE (-1 current); LEAF-SIZE
(0 default); THREADS (0 all cores); DEVICE-MEMORY-LIMIT (bytes, 0 = free)."
  backend device structure leaf-size threads device-memory-limit)

(defconstant +options-scratch-bytes+ 1024)

(defun backend-code (backend)
  (etypecase backend
    (integer backend)
    (keyword (or (position backend #(:auto :cuda :openmp))
                 (usage-error "unknown backend ~S (:auto, :cuda or :openmp)" backend)))))

(defun structure-code (structure)
  (etypecase structure
    (integer structure)
    (keyword (or (position structure #(:auto :kdtree :grid :brute-force))
                 (usage-error "unknown structure ~S (:auto, :kdtree, :grid or :brute-force)"
                              structure)))))

(defun fill-foreign-options (pointer options)
  "Initialise POINTER (at least +OPTIONS-SCRATCH-BYTES+) with the defaults, then OPTIONS."
  (dotimes (i +options-scratch-bytes+) (setf (cffi:mem-aref pointer :uint8 i) 0))
  (with-c-float-environment (%options-init pointer))
  (let ((ours (cffi:foreign-type-size '(:struct knn-options))))
    (cffi:with-foreign-slots ((struct-size backend device structure leaf-size threads
                                           device-memory-limit)
                              pointer (:struct knn-options))
      (when (or (zerop struct-size) (> struct-size ours))
        (setf struct-size ours))
      (when options
        (let ((o options))
          (when (options-backend o) (setf backend (backend-code (options-backend o))))
          (when (options-device o) (setf device (options-device o)))
          (when (options-structure o) (setf structure (structure-code (options-structure o))))
          (when (options-leaf-size o) (setf leaf-size (options-leaf-size o)))
          (when (options-threads o) (setf threads (options-threads o)))
          (when (options-device-memory-limit o)
            (setf device-memory-limit (options-device-memory-limit o)))))))
  pointer)

(defmacro with-foreign-options ((var options) &body body)
  "Bind VAR to a foreign knn_options for OPTIONS (an OPTIONS structure), or to
the NULL pointer when OPTIONS is NIL (library defaults)."
  (let ((o (gensym "OPTIONS")))
    `(let ((,o ,options))
       (if (null ,o)
           (let ((,var (cffi:null-pointer))) ,@body)
           (cffi:with-foreign-pointer (,var +options-scratch-bytes+)
             (fill-foreign-options ,var ,o)
             ,@body)))))

(defun default-options-plist ()
  "The library's defaults as a plist (:struct-size 40 :backend 0 ...)."
  (cffi:with-foreign-pointer (p +options-scratch-bytes+)
    (fill-foreign-options p nil)
    (cffi:with-foreign-slots ((struct-size backend device structure leaf-size threads
                                           device-memory-limit)
                              p (:struct knn-options))
      (list :struct-size struct-size :backend backend :device device :structure structure
            :leaf-size leaf-size :threads threads :device-memory-limit device-memory-limit))))

(defun merge-options (options keys)
  "OPTIONS (or a fresh OPTIONS) with the non-NIL fields of the plist KEYS applied."
  (if (and (null options) (loop for v in (cdr keys) by #'cddr never v))
      nil
      (let ((o (if options (copy-options options) (make-options))))
        (loop for (key value) on keys by #'cddr
              when value
                do (ecase key
                     (:backend (setf (options-backend o) value))
                     (:device (setf (options-device o) value))
                     (:structure (setf (options-structure o) value))
                     (:leaf-size (setf (options-leaf-size o) value))
                     (:threads (setf (options-threads o) value))
                     (:device-memory-limit (setf (options-device-memory-limit o) value))))
        o)))
